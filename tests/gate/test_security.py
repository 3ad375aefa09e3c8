"""Security rules: one minimal violating sample per rule and the near misses that must pass."""

from __future__ import annotations

import pytest

from tests.gate import check, rules

VIOLATIONS = [
    # banned imports (and uses of partially allowed modules)
    ("import subprocess", "banned_import"),
    ("from subprocess import run", "banned_import"),
    ("import commands", "banned_import"),
    ("import multiprocessing", "banned_import"),
    ("from concurrent.futures import ProcessPoolExecutor", "banned_import"),
    ("import asyncio.subprocess", "banned_import"),
    ("import pty", "banned_import"),
    ("import ctypes", "banned_import"),
    ("import cffi", "banned_import"),
    ("import pickle", "banned_import"),
    ("import marshal", "banned_import"),
    ("import shelve", "banned_import"),
    ("import shutil", "banned_import"),
    ("import tempfile", "banned_import"),
    ("import importlib", "banned_import"),
    ("import builtins", "banned_import"),
    ("import code", "banned_import"),
    ("import inspect", "banned_import"),
    ("import sys\nsys.modules['json']", "banned_import"),
    ("import sys\nf = sys._getframe()", "banned_import"),
    ("import os\nos.system('id')", "banned_import"),
    ("import os\nos.listdir('/')", "banned_import"),
    ("from os import system", "banned_import"),
    ("from os import *", "banned_import"),
    ("import posix", "banned_import"),
    # raw network
    ("import socket", "raw_network"),
    ("import http.client", "raw_network"),
    ("import urllib.request", "raw_network"),
    ("import urllib\nurllib.request.urlopen('http://x')", "raw_network"),
    ("import requests", "raw_network"),
    ("import httpx", "raw_network"),
    ("import asyncio\nasyncio.open_connection('h', 1)", "raw_network"),
    ("import ssl", "raw_network"),
    # banned calls
    ("eval('1')", "banned_call"),
    ("exec('x = 1')", "banned_call"),
    ("compile('1', 'f', 'eval')", "banned_call"),
    ("__import__('json')", "banned_call"),
    ("breakpoint()", "banned_call"),
    # file writes
    ("open('/tmp/x', 'w')", "file_write"),
    ("open('/tmp/x', 'a')", "file_write"),
    ("open('/tmp/x', 'x')", "file_write"),
    ("open('/tmp/x', 'r+')", "file_write"),
    ("open('/tmp/x', mode='wb')", "file_write"),
    ("MODE = input()\nopen('/tmp/x', MODE)", "file_write"),
    ("from pathlib import Path\nPath('/tmp/x').write_text('1')", "file_write"),
    ("from pathlib import Path\nPath('/tmp/x').write_bytes(b'1')", "file_write"),
    ("from pathlib import Path\nPath('/tmp/x').open('w')", "file_write"),
    ("from pathlib import Path\nPath('/tmp/d').mkdir()", "file_write"),
    ("import io\nio.open('/tmp/x', 'w')", "file_write"),
    ("import logging\nlogging.FileHandler('/tmp/log')", "file_write"),
    ("import logging\nlogging.basicConfig(filename='/tmp/log')", "file_write"),
    # dynamic access, introspection, patching, harness internals
    ("x = __builtins__", "dynamic_access"),
    ("g = globals()", "dynamic_access"),
    ("import json\ngetattr(json, input())", "dynamic_access"),
    ("import json\nm = json", "dynamic_access"),
    ("import operator\noperator.attrgetter('x')", "dynamic_access"),
    ("y = ().__class__.__base__.__subclasses__()", "introspection"),
    ("def f():\n    pass\ng = f.__globals__", "introspection"),
    ("import json\njson.loads = print", "module_patch"),
    ("import json\nsetattr(json, 'loads', print)", "module_patch"),
    ("from shoparena.store import open_store", "harness_import"),
    ("from shoparena.tasks.loader import load_problems", "harness_import"),
    ("import shoparena._http", "raw_network"),
]


@pytest.mark.parametrize(("body", "rule"), VIOLATIONS, ids=[v[0].split("\n")[-1][:40] for v in VIOLATIONS])
def test_each_rule_catches_its_minimal_sample(body: str, rule: str) -> None:
    report = check(body)
    assert rule in rules(report), report.violations
    assert not report.accepted and report.cooldown == ("full" if body == "import marshal" else "reduced")
    assert all(v.line >= 1 for v in report.violations)


NEAR_MISSES = [
    "import os\nHOME = os.environ.get('HOME')",
    "import os\nSEED = os.getenv('SHOPARENA_SEED')",
    "import os\nP = os.path.join('a', 'b')",
    "from os import environ, getenv\nX = environ['A'] + getenv('B', '')",
    "from os import path\nP = path.basename('a/b')",
    "import os.path\nP = os.path.exists('x')",
    "import urllib.parse\nQ = urllib.parse.quote('a b')",
    "from urllib.parse import urlencode\nQ = urlencode({'q': 1})",
    "import sys\nsys.stderr.write('x')\nV = sys.version_info",
    "import re\nP = re.compile(r'free shipping|COD', re.I)",
    "import json, itertools, math, time, random, collections, functools, dataclasses, typing",
    "from concurrent.futures import ThreadPoolExecutor\nPOOL = ThreadPoolExecutor(2)",
    "import threading\nLOCK = threading.Lock()",
    "import asyncio\nasyncio.sleep(0)",
    "import hashlib\nH = hashlib.sha256(b'x').hexdigest()",
    "with open('/etc/hostname') as fh:\n    DATA = fh.read()",
    "open('/etc/hostname', 'r').close()\nopen('/etc/hostname', 'rb').close()",
    "from pathlib import Path\nT = Path('/etc/hostname').read_text()\nF = Path('x').open()",
    "class A:\n    def __init__(self):\n        self.x = 1\n    def get(self, name):\n        return getattr(self, name)",
    "D = {'a': 1}\nV = getattr(D, 'get')('a')\nW = vars(D.__class__)",
    "import functools\nF = functools.partial(print, end='')",
    "import typing\nT = typing.TYPE_CHECKING",
    "from shoparena.sdk import GatewayPolicy, GatewaySearch, chat, find_product",
    "from shoparena.env import run_episode\nfrom shoparena.llm.subtasks import parse_intent",
    "def compile_query(q):\n    return q\nX = compile_query('a')",
    "import re\nX = re.compile('a')",
    "from re import compile\nX = compile('a')",
    "X = 'eval'\nY = 'import subprocess'",
    "import json\nX = json.dumps({'official': True, 'service': 'freeShipping,COD,flashsale'})",
]


@pytest.mark.parametrize("body", NEAR_MISSES, ids=[b.split("\n")[-1][:40] for b in NEAR_MISSES])
def test_near_misses_pass(body: str) -> None:
    report = check(body)
    assert report.accepted, report.violations


def test_messages_say_what_where_and_why() -> None:
    (v,) = check("import subprocess").violations
    assert v.line == 1 and "subprocess" in v.message and "processes" in v.message
    (v,) = check("import json\n\n\nX = eval('1')").violations
    assert v.line == 4 and "eval" in v.message and "code" in v.message


def test_one_import_is_reported_once_not_at_every_use() -> None:
    report = check("import subprocess as sp\nsp.run(['a'])\nsp.Popen(['b'])")
    assert [(v.rule, v.line) for v in report.violations] == [("banned_import", 1)]


def test_repeated_uses_are_merged_with_their_lines() -> None:
    (v,) = check("X = eval('1')\nY = eval('2')\nZ = eval('3')").violations
    assert v.line == 1 and "also on lines 2, 3" in v.message
