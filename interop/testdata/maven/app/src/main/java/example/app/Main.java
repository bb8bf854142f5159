package example.app;

import example.lib.Greeting;

public final class Main {
    public static void main(String[] args) {
        System.out.println(Greeting.of("membuf"));
    }
}
