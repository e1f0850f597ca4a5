"""One module of the AISysProj server's test suite against a live server (see aisys_compat.py).

    python suite.py URL MODULE      (run with that server's checkout as the working directory)

Run in the suite's interpreter: it replaces Flask's test client with one that sends the same
requests over HTTP to URL, runs the module with unittest, and prints its counts on the last
line (``RESULT tests failures errors``).
"""

import json as _json
import sys
import unittest

import flask
import requests

BASE = sys.argv[1].rstrip("/")
MODULE = sys.argv[2]


class HttpResponse:
    """What the suite reads of a Flask test response, from an HTTP response."""

    def __init__(self, response):
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers
        self.data = response.content
        self.text = response.text

    def get_json(self):
        try:
            return _json.loads(self.data)
        except ValueError:
            return None

    @property
    def json(self):  # Flask's test response: .json is get_json()
        return self.get_json()

    def raise_for_status(self):
        self._response.raise_for_status()


class HttpTestClient:
    """Flask's test client interface, over HTTP to a live server."""

    def open(self, path, method="GET", json=None, data=None, headers=None, **kwargs):
        url = BASE + "/" + str(path).lstrip("/")
        return HttpResponse(
            requests.request(method, url, json=json, data=data, headers=headers, timeout=60)
        )


flask.Flask.test_client = lambda self, *args, **kwargs: HttpTestClient()
suite = unittest.defaultTestLoader.loadTestsFromName(f"aisysprojserver_test.{MODULE}")
result = unittest.TextTestRunner(verbosity=2).run(suite)
print(f"RESULT {result.testsRun} {len(result.failures)} {len(result.errors)}")
