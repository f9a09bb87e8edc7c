"""tensorscope where the training loop is a trainer's: one line in its callbacks.

- `tensorscope.integrations.lightning.TensorscopeCallback`: PyTorch Lightning
  (`lightning.pytorch`, or the older `pytorch_lightning`).
- `tensorscope.integrations.huggingface.TensorscopeCallback`: the Hugging Face
  `transformers.Trainer`.

Each tracks the model (its outputs and the gradients at them, summaries every step,
whole tensors every `every_n`), stamps each record with the trainer's optimizer step (so
with gradient accumulation a step is one optimizer step), sends as the trainer's global
rank, closes at the end of training (and on an exception where the trainer says so), and
puts the anomalies the daemon found into the trainer's log. Nothing here is imported
until a submodule is: the trainer packages stay optional."""
