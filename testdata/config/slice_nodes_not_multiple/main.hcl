policy "pairs" {
  slice {
    nodes    = 2
    locality = "network_group"
  }
}

job "train" {
  policy  = policy.pairs
  nodes   = 5
  command = ["python", "train.py"]
}
