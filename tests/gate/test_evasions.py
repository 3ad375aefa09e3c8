"""Evasions of the banned-import and banned-call rules are caught: renaming, namespaces, built names, wrappers."""

from __future__ import annotations

import pytest

from tests.gate import check, rules

EVASIONS = [
    # namespaces
    ("getattr(__builtins__, 'ev' + 'al')('1')", "banned_call"),
    ("getattr(__builtins__, '{}{}'.format('ev', 'al'))('1')", "banned_call"),
    ("getattr(__builtins__, ''.join(['ex', 'ec']))('x=1')", "banned_call"),
    ("getattr(__builtins__, 'lave'[::-1])('1')", "banned_call"),
    ("getattr(__builtins__, f\"{'ev'}al\")('1')", "banned_call"),
    ("getattr(__builtins__, ''.join(chr(c) for c in [101, 118, 97, 108]))('1')", "banned_call"),
    ("getattr(__builtins__, bytes.fromhex('6576616c').decode())('1')", "banned_call"),
    ("A = 'ev'\nB = 'al'\ngetattr(__builtins__, A + B)('1')", "banned_call"),
    ("globals()['__builtins__']", "dynamic_access"),
    ("globals()['eval']('1')", "banned_call"),
    ("locals()['__builtins__']", "dynamic_access"),
    ("vars()['__builtins__']", "dynamic_access"),
    ("import os\nvars(os)['system']('id')", "banned_import"),
    ("__builtins__.__dict__['__import__']('os')", "banned_call"),
    ("__builtins__.__dict__.get('exec')('x=1')", "banned_call"),
    ("__builtins__['eval']('1')", "banned_call"),
    ("from builtins import eval as e\ne('1')", "banned_call"),
    # aliases
    ("from os import system as s\ns('id')", "banned_import"),
    ("import subprocess as sp\nsp.run(['id'])", "banned_import"),
    ("e = eval\ne('1')", "banned_call"),
    ("a = eval\nb = a\nc = b\nc('1')", "banned_call"),
    ("a, b = eval, exec\nb('x=1')", "banned_call"),
    ("import sys\ndef f():\n    return h.modules\nh = g\ng = e\ne = d\nd = c\nc = b\nb = a\na = sys", "banned_import"),
    ("for f in (eval, exec):\n    f('1')", "banned_call"),
    ("if (e := eval):\n    e('1')", "banned_call"),
    ("f = None or eval", "banned_call"),
    ("f = eval if True else print", "banned_call"),
    ("ｅｖａｌ('1')", "banned_call"),  # NFKC: Python reads this as eval
    ("eval.__call__('1')", "banned_call"),
    # imports by built names
    ("__import__('sub' + 'process').run(['id'])", "banned_import"),
    ("__import__('o' 's').system('id')", "banned_import"),
    ("getattr(__import__('os'), 'sys' + 'tem')('id')", "banned_import"),
    ("import importlib\nimportlib.import_module('so' + 'cket')", "raw_network"),
    ("m = __import__('importlib').import_module('subprocess')", "banned_import"),
    ("import sys\nsys.modules['os'].system('id')", "banned_import"),
    ("import sys\nsys.modules.get('subprocess')", "banned_import"),
    ("import sys\nsys.modules['builtins'].eval('1')", "banned_call"),
    # run-time names that cannot be folded: the dynamic access itself is reported
    ("import os\nname = input()\ngetattr(os, name)('id')", "banned_import"),
    ("import json\ngetattr(json, input())", "dynamic_access"),
    ("getattr(__builtins__, input())('1')", "dynamic_access"),
    ("globals()[input()]", "dynamic_access"),
    ("__import__(input())", "banned_call"),
    ("import os\ndef f(o, n):\n    return getattr(o, 'sys' + n)\nf(os, 'tem')", "banned_import"),
    ("import json\ndef f(o, n):\n    return getattr(o, 'sys' + n)\nf(json, 'tem')", "dynamic_access"),
    ("import json\nc = json.codecs.decode('x', 'rot13')", "obfuscation_import"),
    # wrappers: lambda, functools, decorators, map, default arguments
    ("f = lambda s: eval(s)", "banned_call"),
    ("g = (lambda: eval)()\ng('1')", "banned_call"),
    ("import functools\nf = functools.partial(eval, '1')", "banned_call"),
    ("from functools import partial\nf = partial(exec)", "banned_call"),
    ("@eval\ndef f():\n    pass", "banned_call"),
    ("R = list(map(eval, ['1', '2']))", "banned_call"),
    ("def f(run=exec):\n    run('x=1')", "banned_call"),
    ("import operator\nf = operator.methodcaller('system', 'id')", "dynamic_access"),
    # introspection gadgets
    ("c = [x for x in ().__class__.__base__.__subclasses__() if x.__name__ == 'Popen']", "introspection"),
    ("def f():\n    pass\nb = f.__globals__['__builtins__']", "introspection"),
    ("import sys\nb = sys._getframe().f_back.f_globals", "banned_import"),
    ("g = (x for x in ()).gi_frame.f_globals", "introspection"),
    ("x = getattr(print, '__self__')", "dynamic_access"),
    ("print.__self__.eval('1')", "introspection"),
    ("x = getattr(print, '__name__')", None),
    ("def f():\n    pass\nX = '{0.__globals__}'.format(f)", "introspection"),
    ("import asyncio\nloop = asyncio.new_event_loop()\nloop.subprocess_exec(None, 'id')", "banned_import"),
    ("import asyncio\nloop = asyncio.new_event_loop()\nloop.create_connection(None, 'h', 1)", "raw_network"),
    # modules reached through another module's namespace
    ("import json\njson.codecs.open('/tmp/x', 'w')", "file_write"),
    ("from shoparena.sdk import client\nclient.socket.create_connection(('h', 1))", "raw_network"),
    ("from shoparena.sdk import client\nclient.os.system('id')", "banned_import"),
    # file writes in disguise
    ("M = 'w' + 'b'\nopen('/tmp/x', M)", "file_write"),
    ("o = open\no('/tmp/x', 'a')", "file_write"),
    ("open('/tmp/x', input())", "file_write"),
]


@pytest.mark.parametrize(("body", "rule"), EVASIONS, ids=[e[0].split("\n")[-1][:48] for e in EVASIONS])
def test_evasion_is_caught(body: str, rule: str | None) -> None:
    report = check(body)
    if rule is None:
        assert report.accepted, report.violations
        return
    assert rule in rules(report), report.violations
    assert not report.accepted


def test_unfoldable_getattr_on_an_unknown_object_is_allowed() -> None:
    assert check("class A:\n    x = 1\nv = getattr(A(), input(), None)").accepted
