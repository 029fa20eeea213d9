/* CPU implementations: to come. */ typedef int orin_placeholder_;
