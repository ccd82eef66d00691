job "train" {
  nodes         = 1
  gpus_per_node = -1
  command       = ["python", "train.py"]
}
