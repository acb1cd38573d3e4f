// Keeps kolo_test_util non-empty when no helper sources exist.
