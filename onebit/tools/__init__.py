"""Library functions behind the measuring commands (`onebit acceptance`, `onebit sweep`).

Each command in `onebit.commands` is a thin face over a function here, which tests call
directly: `acceptance.score(...)` scores a head against its target's greedy text;
`sweep.sweep(...)` runs the loop for a range of k and times it.
"""
