"""Fine-tuning from pretrained weights: the settings' rules (config.py, which trainer.config calls
and so imports no torch) and what training does with them (recipe.py).

Empty on purpose: importing `trainer.finetune.config` must not load torch."""
