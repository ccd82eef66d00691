job "train" {
  nodes         = 2
  gpus_per_nod  = 4
  command       = ["python", "train.py"]
}
