job "train" {
  nodes   = 1
  command = ["python", "train.py"]
}

job "train" {
  nodes   = 2
  command = ["python", "train.py"]
}
