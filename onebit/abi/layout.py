"""ctypes mirrors of `onebit_abi.h`'s structs and function types (ABI version 1).

Field order and types follow the header exactly; `tests/native/test_abi_header.py` compiles a
probe that prints the C sizes and offsets and compares them with these.
"""

from __future__ import annotations

import ctypes as C

I32 = C.c_int32
P_I32 = C.POINTER(C.c_int32)
P_F32 = C.POINTER(C.c_float)

# base callbacks
MaxRowsFn = C.CFUNCTYPE(I32, C.c_void_p, P_I32)
ResetFn = C.CFUNCTYPE(I32, C.c_void_p)
StepFn = C.CFUNCTYPE(I32, C.c_void_p, I32, I32, P_F32)
VerifyFn = C.CFUNCTYPE(I32, C.c_void_p, P_I32, I32, I32, P_F32)
CommitVerifyFn = C.CFUNCTYPE(I32, C.c_void_p, I32)
LastHiddenFn = C.CFUNCTYPE(I32, C.c_void_p, P_F32)
LastHiddenRowsFn = C.CFUNCTYPE(I32, C.c_void_p, P_F32, P_I32)
# head callbacks
NeedsHiddenFn = C.CFUNCTYPE(I32, C.c_void_p, P_I32)
ProposeFn = C.CFUNCTYPE(I32, C.c_void_p, I32, I32, I32, P_F32, P_I32, P_I32)
CommitRowsFn = C.CFUNCTYPE(I32, C.c_void_p, P_I32, P_F32, I32)
OnTokenFn = C.CFUNCTYPE(I32, C.c_void_p, I32)


class Base(C.Structure):
    _fields_ = [
        ("self", C.c_void_p),
        ("vocab_size", I32),
        ("hidden_size", I32),
        ("max_batch_rows", MaxRowsFn),
        ("max_prefill_rows", MaxRowsFn),
        ("reset", ResetFn),
        ("step", StepFn),
        ("verify", VerifyFn),
        ("commit_verify", CommitVerifyFn),
        ("last_hidden", LastHiddenFn),
        ("last_hidden_rows", LastHiddenRowsFn),
    ]


class Head(C.Structure):
    _fields_ = [
        ("self", C.c_void_p),
        ("needs_last_hidden", NeedsHiddenFn),
        ("propose", ProposeFn),
        ("commit_rows", CommitRowsFn),
        ("reset", ResetFn),
    ]


STATS_FIELDS = ("rounds", "steps", "batches", "batch_rows", "proposed", "accepted", "emitted",
                "prefill_steps", "prefill_batches", "prefill_rows", "drafts_asked")


class Stats(C.Structure):
    _fields_ = [(name, C.c_int64) for name in STATS_FIELDS]


RUN_ARGTYPES = [C.POINTER(Base), C.POINTER(Head), P_I32, I32, I32, I32, OnTokenFn, C.c_void_p,
                P_I32, P_I32, P_I32, C.POINTER(Stats)]
MakeBaseFn = C.CFUNCTYPE(C.POINTER(Base))
FreeBaseFn = C.CFUNCTYPE(None, C.POINTER(Base))
