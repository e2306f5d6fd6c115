"""The Kubernetes end-to-end tests' shared harness: the FAKE API server and controller
(test-fake-controller.py's Fake; its requirement check runs on import) and the tool runner
(test-kube-backend-e2e.py's Env, tap, objects_left). Their file names are not module names,
so they are loaded by path."""

import importlib.util
import os
import sys

sys.dont_write_bytecode = True  # importing must not write into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


e2e = _load("kubee2e", "test-kube-backend-e2e.py")
fc = e2e.fc  # the one the e2e module loaded: one tap counter for the whole test
