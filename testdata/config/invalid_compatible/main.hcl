policy "same" {
  compatible = ["torch", "cuda"]
}
