"""Evaluation of fitted models: metrics (KL divergence, free energy, errors), held-out
one-step likelihood on tracks, the baselines it is compared with, and the model-adequacy
(Helmholtz) check."""
