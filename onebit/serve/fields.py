"""The checks every part of the request boundary shares (chat and completions bodies, the
Responses API, tools): text a tokenizer can take, unknown keys refused by name, and what counts
as a field's "not used" value. Errors are `RequestError`s naming the field as the client sent
it."""

from __future__ import annotations

import json

from onebit.serve.errors import RequestError


def checked_text(value: str, where: str) -> str:
    """`value` if it is text a tokenizer can take: JSON's `\\ud800` escapes decode to lone
    surrogates, which are no Unicode characters and no UTF-8; refused naming the field."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(where, f"{where} holds invalid Unicode at character {error.start} "
                           f"(a lone surrogate, {value[error.start]!r}): send UTF-8 text") \
            from None
    return value


def refuse_unknown(keys, allowed, where: str, what: str) -> None:
    """The first of `keys` not in `allowed` refused, named `where` + key: an unknown field is
    never dropped, since it may be one that would change the answer."""
    for key in keys:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise RequestError(name, f"unknown field {name!r}: onebit serve does not implement "
                               f"it, and refuses it rather than ignore what could change "
                               f"{what} (docs/serve.md lists the fields)")


def is_neutral(value, neutrals: tuple) -> bool:
    """Whether `value` means "not used": null, or one of `neutrals` (a bool only as a bool:
    `1` is not `true`, `false` is not `0`)."""
    return value is None or any(isinstance(value, bool) == isinstance(n, bool) and value == n
                                for n in neutrals)


def is_jsonable(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
