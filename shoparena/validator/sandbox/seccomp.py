"""A small seccomp deny-list for the sandbox (x86-64), handed to bubblewrap as a compiled BPF program.

Bubblewrap runs privileged when the validator is root (a user namespace would map the sandbox to host root), so
``--disable-userns`` is not available there; this filter closes the same door and a few more: new namespaces
(``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag), mounting, kernel keyrings, ``ptrace`` and
process_vm_*, ``bpf``, ``perf_event_open``, ``userfaultfd``, io_uring, module and kexec loading. ``clone3`` answers
ENOSYS so the C library falls back to ``clone``, whose flags the filter can read. Syscalls of any other ABI
(i386, x32) are refused. Docker's default profile covers the same ground for the docker backend.

:func:`group_filter` is the second, per-problem filter of batch mode (:mod:`.executor`): each problem's process
installs it on itself after ``setsid()`` and before the agent's code runs, so that nothing of the problem can leave
its session or process group (``setsid`` / ``setpgid`` answer EPERM): killing the group then kills the whole
problem, fork bombs included.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["DENIED", "GROUP_DENIED", "filter_program", "group_filter", "supported"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

#: x86-64 syscall numbers answered with EPERM.
DENIED: dict[str, int] = {
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
}
#: What a batch-mode problem process may no longer do (x86-64 numbers): leave its session or process group.
GROUP_DENIED: dict[str, int] = {"setpgid": 109, "setsid": 112}
_CLONE, _CLONE3 = 56, 435
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000


def supported() -> bool:
    """The filter is written for x86-64 only."""
    return platform.machine() in ("x86_64", "AMD64")


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def filter_program() -> bytes:
    """The ``struct sock_filter`` array bubblewrap's ``--seccomp FD`` expects."""
    return _compile(sorted(set(DENIED.values())), clone_checks=True)


def group_filter() -> bytes:
    """The per-problem filter of batch mode: foreign ABIs and :data:`GROUP_DENIED` refused, all else allowed."""
    return _compile(sorted(set(GROUP_DENIED.values())), clone_checks=False)


def _compile(nrs: list[int], *, clone_checks: bool) -> bytes:
    prog: list[tuple[int, int, int, int] | str] = [
        (_LD_W_ABS, 4, 0, 0),                      # arch
        (_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        "deny",
        (_LD_W_ABS, 0, 0, 0),                      # syscall number
        (_JGE_K, _X32_BIT, 0, 1),
        "deny",
    ]
    if clone_checks:
        prog += [(_JEQ_K, _CLONE3, 0, 1), "enosys"]
    for nr in nrs:
        prog += [(_JEQ_K, nr, 0, 1), "deny"]
    if clone_checks:
        prog += [
            (_JEQ_K, _CLONE, 0, 3),
            (_LD_W_ABS, 16, 0, 0),                 # low 32 bits of clone's flags (args[0])
            (_JSET_K, _CLONE_NEW_MASK, 0, 1),
            "deny",
        ]
    prog.append((_RET_K, _RET_ALLOW, 0, 0))
    out = []
    for item in prog:
        if item == "deny":
            out.append(_ins(_RET_K, _RET_ERRNO | _EPERM))
        elif item == "enosys":
            out.append(_ins(_RET_K, _RET_ERRNO | _ENOSYS))
        else:
            code, k, jt, jf = item  # type: ignore[misc]
            out.append(_ins(code, k, jt, jf))
    return b"".join(out)
