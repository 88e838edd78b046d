"""A stand-in for MLflow's tracking server in unit tests: the REST routes module_utils.tracking.mvp_mlflow calls.

Only the payload shapes of MLflow's REST API 2.0 (mlflow.org/docs/latest/rest-api.html), kept in
memory; the real server runs in the molecule train scenario (a job's run against its metrics file).
"""

import itertools


class FakeMlflow(object):
    """Experiments, runs (with tags and status) and artifacts in dicts; ``calls`` lists (method, path)."""

    def __init__(self, healthy=True):
        self.healthy = healthy
        self.experiments = {"Default": "0"}
        self.runs = {}
        self.artifacts = {}
        self.metrics = {}
        self.calls = []
        self._ids = itertools.count(1)

    def handle(self, method, path, query, headers, body):
        """Answer one request: (status, payload)."""
        self.calls.append((method, path))
        api = "/api/2.0/mlflow/"
        if path == "/health":
            return (200, "OK") if self.healthy else (503, "down")
        if path.startswith("/api/2.0/mlflow-artifacts/artifacts/") and method == "PUT":
            self.artifacts[path[len("/api/2.0/mlflow-artifacts/artifacts/"):]] = body.decode("utf-8")
            return 200, {}
        route = path[len(api):] if path.startswith(api) else path
        if route == "experiments/get-by-name":
            name = query["experiment_name"][0]
            if name not in self.experiments:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No experiment named %s" % name}
            return 200, {"experiment": {"experiment_id": self.experiments[name], "name": name}}
        if route == "experiments/create":
            self.experiments[body["name"]] = str(next(self._ids) + 100)
            return 200, {"experiment_id": self.experiments[body["name"]]}
        if route == "runs/create":
            run_id = "run%d" % next(self._ids)
            self.runs[run_id] = {"info": {"run_id": run_id, "run_name": body["run_name"],
                                          "experiment_id": body["experiment_id"], "status": "RUNNING",
                                          "artifact_uri": "mlflow-artifacts:/%s/%s/artifacts" % (body["experiment_id"],
                                                                                                 run_id)},
                                 "data": {"tags": list(body.get("tags") or [])}}
            return 200, {"run": self.runs[run_id]}
        if route == "runs/search":
            name = body["filter"].split("'")[1]
            found = [r for r in self.runs.values()
                     if r["info"]["run_name"] == name and r["info"]["experiment_id"] in body["experiment_ids"]]
            return 200, {"runs": found[-1:]} if found else {}
        if route == "runs/log-batch":
            tags = {t["key"]: t for t in self.runs[body["run_id"]]["data"]["tags"]}
            tags.update({t["key"]: t for t in body.get("tags") or []})
            self.runs[body["run_id"]]["data"]["tags"] = list(tags.values())
            if len(body.get("metrics") or []) > 1000:
                return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "more than 1000 metrics"}
            self.metrics.setdefault(body["run_id"], []).extend(body.get("metrics") or [])
            return 200, {}
        if route == "runs/get":
            run = self.runs[query["run_id"][0]]
            latest = {}
            for metric in self.metrics.get(query["run_id"][0], []):
                if metric["key"] not in latest or \
                        (metric["timestamp"], metric["step"]) >= (latest[metric["key"]]["timestamp"],
                                                                  latest[metric["key"]]["step"]):
                    latest[metric["key"]] = metric
            return 200, {"run": dict(run, data=dict(run["data"], metrics=list(latest.values())))}
        if route == "runs/update":
            self.runs[body["run_id"]]["info"]["status"] = body["status"]
            return 200, {}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": path}

    def tags(self, run_id):
        """The run's tags as a dict."""
        return {t["key"]: t["value"] for t in self.runs[run_id]["data"]["tags"]}
