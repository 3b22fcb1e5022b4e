"""The sampling contract: exact enumeration, scenarios, traces, checks S1..S4,
`check_sampling`, `SamplingContract`, and the gaps a negative control is measured by."""
