job "train llama" {
  nodes   = 1
  command = ["python", "train.py"]
}
