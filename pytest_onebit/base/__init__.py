"""The base-model contract: checks B1..B8 on a stepped subject, `check_base`, `BaseContract`,
the `--onebit-base` option and the `--pyargs` target (`base.conformance`)."""
