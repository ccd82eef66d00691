job "train" {
  nodes   = 1
  command = []
}
