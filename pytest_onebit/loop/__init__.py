"""The loop contract: scenarios, traces, checks I1..I13, `check_loop`, `LoopContract`, the
Hypothesis strategy and `onebit prove`."""
