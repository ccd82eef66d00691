fleet "lab" {
  host "a1" { address = "10.0.0.1" }

job "train" {
  nodes   = 1
  command = ["python", "train.py"]
}
