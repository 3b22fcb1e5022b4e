"""Training a draft head for a base onebit loads (`onebit train-head`): prompts.py (what the base
answers), data.py (its greedy answers and the rows it computed along them), fit.py (the head in
torch and its training-time test), recipe.py (the whole run). Needs torch (CPU); the engine
never imports this package to draft."""
