job "train" {
  nodes   = 0
  command = ["python", "train.py"]
}
