job "train" {
  nodes   = 2
  command = ["python", "train.py"]

  torchrun {
    args = ["--log_dir", "logs"]
  }
  torchrun {
    args = ["--redirects", "3"]
  }
}
