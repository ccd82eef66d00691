# Attributes written by hand, never aligned.
policy "tight" {
group_locality = "zone"
  rank= "spread"
    regions = [ "europe-west1","europe-west4" ]
}

job    "train"   {
  policy = policy.tight
  nodes = 4
  gpus_per_node   = 4
  command = ["python","train.py"]
  env = {
    NCCL_DEBUG = "INFO"
    OMP_NUM_THREADS= "8"
  }
}
