"""The batch contract: a batched engine serves each sequence exactly as alone (M1..M6).

`toy` is the batched toy base, `scenarios` the scripts of arrivals and cancels, `trace` runs
one, `checks` judges it, `runner` holds an engine to all of it (`check_batch`), `suite` is the
pytest face (`BatchContract`).
"""
