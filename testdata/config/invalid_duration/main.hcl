job "train" {
  nodes        = 1
  command      = ["python", "train.py"]
  stop_timeout = "30 seconds"
}
