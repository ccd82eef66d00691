policy "tight" {
  group_locality   = "zone"
  rank             = "spread"
  on_unschedulable = "wait"
  bucket_choice    = "best_fit"
  regions          = ["europe-west1"]
}

policy "lab_first" {
  group_locality = "prefer"
  rank           = "most_free_memory"
  bucket_choice  = "first_fill"
  regions        = ["paris"]
}

job "train" {
  policy        = policy.tight
  nodes         = 2
  gpus_per_node = 4
  command       = ["python", "train.py", "--epochs", tostring(var.epochs)]
  env           = merge(local.common_env, { WANDB_MODE = "offline" })
  workdir       = "/srv/train"
  launcher      = "torchrun"
  stop_timeout  = "2m"
  labels        = { team = local.team }
}

job "eval" {
  policy        = policy.lab_first
  nodes         = 1
  gpus_per_node = 1
  command       = ["python", "eval.py", "--checkpoint", "runs/latest"]
  env           = local.common_env
  launcher      = "plain"
}
