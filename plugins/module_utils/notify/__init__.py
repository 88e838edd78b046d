# -*- coding: utf-8 -*-
"""Telling people what happened to a run: webhooks with the verdict, written to an outbox and delivered at least once.

The endpoints' settings, the events and their payload, the signature, the outbox on the shared storage and the
sender that delivers it (``mvp_notify``); the job controller emits the events (``lifecycle/mvp_controller``).
"""
