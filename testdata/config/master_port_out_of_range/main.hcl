job "train" {
  nodes       = 1
  command     = ["python", "train.py"]
  master_port = 70000
}
