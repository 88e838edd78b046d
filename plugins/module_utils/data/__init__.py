# -*- coding: utf-8 -*-
"""The data a job trains on: the GSM8K data set converted to verl's parquet formats (``mvp_gsm8k``) and the
tiny random-weight model of the CPU test cluster (``mvp_tiny_model``).
"""
