job "train" {
  nodes   = 2
  command = "python train.py"
}
