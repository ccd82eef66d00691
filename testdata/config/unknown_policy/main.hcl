policy "tight" {
  group_locality = "zone"
}

job "train" {
  policy  = policy.tigth
  nodes   = 2
  command = ["python", "train.py"]
}
