fleet "lab" {
  region = "paris"
  host "a1" { address = "10.0.0.1" }
}

policy "europe" {
  regions = ["europe-west1"]
}

job "train" {
  policy  = policy.europe
  nodes   = 1
  command = ["python", "train.py"]
}
