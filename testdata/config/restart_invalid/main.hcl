job "train" {
  nodes   = 1
  command = ["python", "train.py"]
  kind    = "daemon"
  restart {
    attempts         = -2
    retry_exit_codes = [75, 300]
    fail_exit_codes  = [2]
    delay            = "1m"
    max_delay        = "30s"
  }
  restart {
    attempts = 1
  }
}
