"""Remote envs in RL libraries' own types: Stable-Baselines3 (:mod:`.sb3`), TorchRL
(:mod:`.torchrl`) and RLlib (:mod:`.rllib`), each behind its optional extra."""
