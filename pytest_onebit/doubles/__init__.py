"""Test doubles: the toy base, the oracle heads and the sampling heads the contracts run
loops on."""
