policy "tight" {
  group_locality = "zones"
}

fleet "lab" {
  host "a1" { address = "10.0.0.1" }
  host "a2" { address = "10.0.0.2" }
}

job "train" {
  policy        = policy.tigth
  nodes         = 2
  gpus_per_node = "four"
  command       = ["python", "train.py"]
}
