"""The base-model contract: checks B1..B7 on a stepped subject, `check_base`, `BaseContract`,
the `--onebit-base` option and the `--pyargs` target (`base.conformance`)."""
