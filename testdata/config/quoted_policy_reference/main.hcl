policy "tight" {}

job "train" {
  policy  = "tight"
  nodes   = 1
  command = ["python", "train.py"]
}
