/* model runner: to come */ typedef int orin_placeholder_;
