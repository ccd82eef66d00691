job "train" {
  command = ["python", "train.py"]
}
