job "prep" {
  nodes    = 1
  command  = ["python", "prep.py"]
  launcher = "plain"

  torchrun {
    args = ["--log_dir", "logs"]
  }
}
