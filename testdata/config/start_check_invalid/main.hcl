job "train" {
  nodes       = 1
  command     = ["python", "train.py"]
  start_check = "soon"
}
