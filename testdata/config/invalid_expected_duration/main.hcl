job "pretrain" {
  nodes             = 2
  command           = ["python", "pretrain.py"]
  expected_duration = "about an hour"
}
