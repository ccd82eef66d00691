job "train" {
  nodes    = 1
  command  = ["python", "train.py"]
  launcher = "mpirun"
}
