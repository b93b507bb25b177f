from benchmarks.experiments.learner_comparison.comparison import main

if __name__ == "__main__":
    main()
