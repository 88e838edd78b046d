"""mvp_submission.wait_for_starting_server: a submission waits for a tracking server that is still starting."""
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_submission import wait_for_starting_server


class Server(object):
    """A tracking server that answers /health from its ``answers_from``-th look on (None: never)."""

    def __init__(self, answers_from):
        self.answers_from, self.looks = answers_from, 0

    def healthy(self, timeout=5):
        self.looks += 1
        return self.answers_from is not None and self.looks >= self.answers_from


class Clock(object):
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds):
        self.now += seconds

    def __call__(self):
        return self.now


def wait(server, service_dir="/tmp/ray/mvp-services", timeout=120, alive=True):
    clock = Clock()
    pid_files = []

    def pid_of(path):
        pid_files.append(path)
        return 42 if alive else None

    waited = wait_for_starting_server(server, service_dir, timeout, sleep=clock.sleep, clock=clock, pid_of=pid_of)
    return waited, clock.now, pid_files


def test_a_server_that_answers_at_once_is_not_waited_for():
    assert wait(Server(1)) == (None, 0.0, [])


def test_a_server_still_starting_is_waited_for_until_it_answers():
    waited, slept, pid_files = wait(Server(5))
    # four looks that found it starting, 0.5 s apart: it answered at the fifth, 2 s after the first
    assert (waited, slept) == (2.0, 2.0)
    assert set(pid_files) == {"/tmp/ray/mvp-services/mlflow.pid"}


def test_a_server_not_running_is_not_waited_for():
    assert wait(Server(None), alive=False)[:2] == (None, 0.0)


def test_a_server_that_never_answers_is_waited_for_at_most_the_timeout():
    waited, slept, _files = wait(Server(None), timeout=10)
    assert waited is None
    assert 10.0 <= slept <= 10.5


def test_without_a_service_folder_nothing_is_asked():
    server = Server(None)
    assert wait(server, service_dir="")[:2] == (None, 0.0)
    assert server.looks == 0
